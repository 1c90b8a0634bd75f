"""kotae's bus kit: JetStream topology, the stage edge, and the embedded server."""
