"""How the lesson is shown: the terminal (rich), the figures (plotly) and JupyterLab's widgets, all drawn from the
step views `lab.lesson` computes.

  cli.py             `dspark-lab walk`, `inspect`, `generate`, `profile`: their options, checks and screens
  render.py          the terminal: the step views, the generate strip, the profile tables
  plots.py           the figures of steps 1A … 5A; plots_6b.py step 6B's; plots_training.py notebook 07's
  figures.py         which figures a step shows (the panels, the deck and the widgets ask here)
  widgets.py         JupyterLab: the state, the step panels, the clickable map
  inspector.py       the 6B inspector; app.py the whole lab app of the notebooks
"""
