"""The lesson: the ten steps 1A → 6B, computed once and shown in every medium.

  steps.py       the registry: ids, columns, flow, every vi/en step text (pure data)
  walk.py        run a prompt through the model, one DSpark round, build the views (`run_walk`, `redraft`)
  view.py        what a view is made of: Walk, StepView, ViewTable, Check, number formatters
  notes.py       the generated notes of the views, the equations' prose, the Vietnamese lesson's setting
  views.py       the views of steps 1A … 5A, each with checks that compare two computations
  view_6b.py     step 6B's view: logits, taps, the draft round, verify, the scheduler under load
  summary.py     `inspect`: a preset's parameter counts, KV bytes and layer roles, without building it
  render.py      the terminal (rich): views, the generate strip, the profile tables
  plots.py       plotly figures of steps 1A … 5A; plots_6b.py step 6B's; plots_training.py notebook 07's;
  figures.py     which figures a step shows (the panels, the deck and the widgets ask here)
  widgets.py     JupyterLab: the state, the step panels, the clickable map; inspector.py the 6B inspector;
  app.py         the whole lab app of the notebooks
  diagrams.py    the mermaid sources and the SVG map, generated from the registry
  generation.py  `generate`: plain vs speculative decoding of one prompt
  exercises.py   the notebooks' exercise checks; nbsync.py keeps the .ipynb in sync with their py:percent sources
  prose.py       the numbers README / docs / notebooks quote, filled from the data between markers (--write, --check)
Data flows one way: config → model → Trace → views → (terminal | plots | widgets | the presenter's pages).
"""
