gate --max-growth 5 --confidence 1.5 base.folded new.folded
