from pyro_dag.infer import train

trained = AutoStructuredGuide(model, precision="chordal", name="trained")  # initial scales from the data
held_out = ({"x": x[1::10]}, {"y": y[1::10], "c": c[1::10]})        # a validation set (here: some cases)
result = train(model, trained, {"x": x}, {"y": y, "c": c}, num_steps=60,
               pretrain_steps=20,          # each node with observed parents fitted alone first
               freeze_fraction=0.5,        # inducing inputs and noise held for the first half
               validation=held_out, validate_every=20, patience=3,
               checkpoint="train.pt", checkpoint_every=20,           # resume=True continues a killed run
               progress=False)
print(len(result.losses), result.best_step)
