"""The linter's front end for ``kafka-eos lint``: ``loaders`` (pipeline and properties files),
``render`` (text and JSON reports) and ``docgen`` (``docs/lint/<ID>.md``). The rules themselves
are the runtime's policy, in ``connectors.policy``."""
