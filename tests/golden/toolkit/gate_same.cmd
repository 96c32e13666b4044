gate --max-growth 0 base.folded base.folded
