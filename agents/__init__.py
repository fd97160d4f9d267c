"""Who decides: the bus, the per-seed coordinator, generators, gates and judges (step 2 on)."""
