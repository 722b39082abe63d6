"""Patterns from Python, through the SDK's typed messages (`mote.patterns`). Init:
`{"report": <path>}`. At start it spawns, as its children, a throttle (50 a second, to the
report path) and a pipeline of stages in three languages (Rust adds 1, Python doubles,
JavaScript adds 3) whose sink is that throttle. `run` `{"n": k}` feeds the pipeline the inputs
`{"value": 0..k}` (kind `number`): their outputs reach the report path through the throttle,
in order."""

import mote
from mote.patterns import init, pipeline, throttle


class Patterns(mote.Actor):
    def start(self, ctx, init_bytes):
        report = mote.decode(init_bytes)["report"]
        me = ctx.myself().path
        ctx.spawn("slow", throttle.MODULE, init(throttle.Config(target=report, rate=50)))
        stages = [
            pipeline.Stage("stage", {"add": 1}),
            pipeline.Stage("py_stage", {"mul": 2}),
            pipeline.Stage("js_stage", {"add": 3}),
        ]
        config = pipeline.Config(stages=stages, sink=f"{me}/slow")
        self.pipeline = ctx.spawn("p", pipeline.MODULE, init(config))

    def receive(self, ctx, env):
        if env.kind == "run":
            for value in range(env.value["n"]):
                ctx.tell(self.pipeline, "number", {"value": value})


Actor, Supervisor, Upgrade = mote.export(Patterns)
