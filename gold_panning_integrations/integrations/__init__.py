"""The framework integrations: the LangChain retriever and compressor
(:mod:`.langchain`, extra ``langchain``), the LlamaIndex postprocessor (:mod:`.llama_index`,
extra ``llama-index``) and their shared base (:mod:`._base`: options, and the one edge
that resolves reader and profile into a :class:`~gold_panning_integrations.GoldPanner`).
Import the classes from the top-level package; this package imports no framework."""
