"""Serving-side pieces of step 6B's confidence-scheduled verification (the policies themselves are model-side,
in dspark_mini/scheduler.py):

  sps.py       the SPS(B) cost table: steps/s of the verify forward vs batch tokens — JSON, validation,
               forced monotone, interpolation, `measure_sps(forward_fn, …)`, synthetic `smooth` / `staircase`;
  simulate.py  load simulation: replay recorded (confidences, accepted) rounds for R = 1 … 256 concurrent
               requests under each policy and table; recording those rounds from the trained lab drafter;
  profile_sps.py  `dspark-lab profile --sps`: SPS(B) of the lab model's verify forward on this machine;
  schedule.py  `dspark-lab schedule`: the simulation on the shipped data (data/sps_lab_cpu.json, the measured
               table; data/streams_dspark.json, recorded rounds) and the scheduler's own cost per round;
  cli.py       the three commands' parsers and option checks (no torch: `--help` stays fast);
  commands.py  their handlers: `profile --sps` and `schedule` as tables or JSON, `serve`'s prompts, run and lines;
  serve.py     `dspark-lab serve`: ragged speculative rounds for R requests in flight, each request
               freed and printed (or streamed as a JSON line) the moment it finishes;
  work.py      the estimate line `serve`, `schedule` and `profile --sps` print before they start, and their
               progress bar;
  plots.py     SPS(B) and B·SPS(B); throughput and mean verify length vs R per policy (paper Fig. 7/8).
"""
