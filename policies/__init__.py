"""Rules that bound a run: budget, prices, attempts and pair selection (step 2 on)."""
