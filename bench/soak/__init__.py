"""``ferry bench soak``: Ferry under a nemesis for N minutes, then what was lost, duplicated or disordered.

The parts: :mod:`.faults` (pure: the one table of the faults the soak can inject, which the command,
the schedule, the nemesis and the report read), :mod:`.schedule` (pure: a seed -> the faults and
when), :mod:`.verdict` (pure: what the source acknowledged and what the destination holds -> lost,
duplicated, disordered per partition),
:mod:`.config` (the soak's own stack, and the config and one route its processes read),
:mod:`.supervisor` (runs the Ferry processes and restarts what exits), :mod:`.stream` (Kafka's
``VerifiableProducer``, and reading a topic back), :mod:`.nemesis` (applies a fault), :mod:`.run`
(one run and its tables) and :mod:`.cli` (the command).
"""
