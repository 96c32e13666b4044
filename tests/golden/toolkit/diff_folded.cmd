diff -t folded base.folded new.folded
