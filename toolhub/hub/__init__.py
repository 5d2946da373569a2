"""Remote toolhub gateways as tool sources (config ``hubs:``), and the runtime merge of every
external tool source into a tool set."""
