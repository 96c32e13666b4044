gate --max-growth 5 base.folded new.folded
