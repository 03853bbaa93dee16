"""The heterogeneous control flow graph (paper §5.3): condition nodes and sub-DNN nodes."""
