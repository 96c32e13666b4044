convert -t speedscope base.folded
