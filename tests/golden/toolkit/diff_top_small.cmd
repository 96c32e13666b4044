diff -t top small_base.folded small_new.folded
