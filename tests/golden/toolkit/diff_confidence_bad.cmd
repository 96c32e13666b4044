diff -t svg --confidence 2 base.folded new.folded
