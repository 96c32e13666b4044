gate --max-growth 5 --min-share 25 base.folded new.folded
