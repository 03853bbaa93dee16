"""Generation of the standalone host module (paper §5.6)."""
