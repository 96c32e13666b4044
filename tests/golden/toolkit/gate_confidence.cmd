gate --max-growth 5 --confidence 0.99 base.folded new.folded
