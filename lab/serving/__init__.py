"""Serving-side pieces of step 6B's confidence-scheduled verification (the policies themselves are model-side,
in dspark_mini/scheduler.py):

  sps.py       the SPS(B) cost table: steps/s of the verify forward vs batch tokens — JSON, validation,
               forced monotone, interpolation, `measure_sps(forward_fn, …)`, synthetic `smooth` / `staircase`;
  simulate.py  load simulation: replay recorded (confidences, accepted) rounds for R = 1 … 256 concurrent
               requests under each policy and table; recording those rounds from the trained lab drafter.
"""
