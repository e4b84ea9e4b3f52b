"""Party programs: a method's server half and client half, written once, run on every backend.

A method's round is the server's program (:meth:`~securefg.methods.base.Method.server_round`):
it asks clients to act through :class:`~securefg.federation.program.context.ServerContext`
(``ask``, ``broadcast``, ``aggregate``, ...), and each client's handler for that action runs
wherever the client lives. The halves meet only through *steps*: one request from the server
to a party, carrying the sealed envelopes addressed to it, and one reply carrying the sealed
envelopes it sent. A backend is one implementation of
:meth:`~securefg.federation.program.server_runtime.ServerRuntime.exchange_steps`:

* in process (:mod:`~securefg.federation.program.inprocess`): the client runtimes are called
  directly, in a fixed order (deterministic; tests, examples, the CLI default);
* Flower (:mod:`securefg.integrations.flower`): each party is its own OS process, possibly on
  its own host, and a step is a Flower ``Message`` over gRPC.
"""
