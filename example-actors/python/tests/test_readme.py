"""The durable, supervised example of the README's "Write an actor in Python" runs as shown."""

import os
import unittest

import fake_wit

fake_wit.install()

import mote  # noqa: E402

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def readme_example():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text.index("## Write an actor in Python")
    start = text.index("```python\n", section) + len("```python\n")
    return text[start:text.index("```", start)]


class ReadmeExample(unittest.TestCase):
    def test_the_orders_actor_recovers_replies_and_supervises(self):
        host = fake_wit.reset()
        names = {}
        exec(readme_example(), names)  # noqa: S102 - the README's own example
        rt = names["Actor"].runtime
        rt.start(b"")
        self.assertEqual(host.named("spawn")[0][:2], ("audit", "auditor"))
        for amount in (5, 2):
            body = f'{{"customer":"ann","amount":{amount}}}'
            rt.receive(fake_wit.message("order", body, "/system/p"))
        self.assertEqual([args[2] for args in host.named("tell")], [b"5", b"7"])
        again = mote.Runtime(names["Orders"])
        again.start(b"")
        self.assertEqual(again.actor.totals, {"ann": 7}, "recovered from the journal")
        child, error = mote.Address("/user/me/audit", 2), mote.FailureKind.ERROR
        self.assertEqual(rt.supervise(child, error, "please retry"), mote.Directive.RESUME)
        self.assertIsNone(rt.supervise(child, error, "other"))


if __name__ == "__main__":
    unittest.main()
