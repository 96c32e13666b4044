gate --max-growth 30 base.folded new.folded
