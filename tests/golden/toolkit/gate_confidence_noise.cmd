gate --max-growth 5 --confidence 0.99 small_base.folded small_new.folded
