"""Adapters that hand a ``Session``'s tools to agent frameworks as the framework's own tools.

One module per framework — ``openai_agents``, ``pydantic_ai``, ``langchain`` — each importing
its framework at the top, so this package itself imports with none of them installed
(``pip install 'toolhub[integrations]'`` brings them all). Every adapter names tools by their
client names, runs each call through ``Session.stream`` so progress surfaces through the
framework's own channel, and gives the model ``prompt_text`` back: reminders included, and a
failed call as a result the model can read rather than an exception that ends the run.
See docs/integrations.md.
"""
