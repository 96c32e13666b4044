convert -f folded --hide "^(parse|run)$" new.folded
