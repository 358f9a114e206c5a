"""The framework integrations: the LangChain retriever and compressor
(:mod:`.langchain_rerankers`, extra ``langchain``), the LlamaIndex postprocessor
(:mod:`.llama_index_postprocessor`, extra ``llama-index``) and their shared base
(:mod:`._framework_base`: options, and the one engine per adapter, a
:class:`~gold_panning_integrations.GoldPanner` that resolves reader and profile once).
Import the classes from the top-level package; this package imports no framework."""
