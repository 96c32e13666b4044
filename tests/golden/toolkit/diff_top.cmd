diff -t top base.folded new.folded
