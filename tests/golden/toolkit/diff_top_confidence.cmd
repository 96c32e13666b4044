diff -t top --confidence 0.5 base.folded new.folded
