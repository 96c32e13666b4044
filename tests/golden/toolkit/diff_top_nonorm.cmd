diff -t top --no-normalize base.folded new.folded
