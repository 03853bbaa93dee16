"""What the in-process compiled model does around each host call: guards against weights
and globals changed after compiling, and module state and inputs written back."""
