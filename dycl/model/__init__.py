"""The user's model and example call: how dycl reads them (signature, outputs, dynamic dims,
library models) and how it leaves them as they were (copies, saved state, silenced prints)."""
