"""The lesson: the ten steps 1A → 6B, and what each step computes (plain data, no medium).

  steps.py       the registry: ids, columns, flow; each step's texts come from lab/lang/<lang>/steps.toml
  walk.py        run a prompt through the model, one DSpark round, build the views (`run_walk`, `redraft`)
  view.py        what a view is made of: Walk, StepView, ViewTable, Check, number formatters
  notes.py       the generated notes of the views, the equations' prose, the Vietnamese lesson's setting
  views.py       the views of steps 1A … 5A, each with checks that compare two computations
  view_6b.py     step 6B's view: logits, taps, the draft round, verify, the scheduler under load
  summary.py     `inspect`: a preset's parameter counts, KV bytes and layer roles, without building it
  generation.py  `generate`: plain vs speculative decoding of one prompt
  exercises.py   the notebooks' exercise checks
Data flows one way: config → model → Trace → views → lab.screens (terminal | figures | widgets) and lab.present's
pages; lab.sync regenerates what the docs and notebooks quote.
"""
