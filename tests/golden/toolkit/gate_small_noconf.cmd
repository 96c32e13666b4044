gate --max-growth 5 small_base.folded small_new.folded
