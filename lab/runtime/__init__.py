"""The model a command runs: in this process, or sharded over N ranks under torchrun.

run.py          run_model(…): the model a command runs on — a checkpoint read back (lab.realscale), or the lab's
                set; refused before allocating when it does not fit (lab.realscale.placement); a rank's shard
                under torchrun
distributed.py  torchrun's environment and the process group, sharding a built model, loading only a rank's
                share of a checkpoint (the table of who holds what is at its top)
parallel.py     the modules a rank runs instead of the whole ones (vocab, row and expert parallel, Engram rows)
                and the collectives that combine their pieces
torchrun.py     `torchrun … -m lab.runtime.torchrun {generate,check}`: the lab model over N ranks
"""
