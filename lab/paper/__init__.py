"""The DSpark paper in miniature: `dspark-lab paper` (and `make paper`).

cli.py        the command's options and checks (no torch: `--help` stays fast)
run.py        the budgets, the worker jobs with their progress bars, the JSON of every item
measure.py    Table 1 and Figures 2, 5, 6 on the shipped set; the load simulation of Figures 7, 8; Appendix A
variants.py   the extra drafters of Figures 3 and 4 (depth, block), trained alike on one target cache
items.py      one record per item: the lab's numbers, the paper's beside them with their section
figures.py    the plotly figures (vi / en) and their PNGs; docs.py the generated docs/paper.md and paper.vi.md
texts.py      the figures' and screens' strings; paper_values.json the paper's numbers, each with its section
"""
