"""data_gen: synthetic data of a schema's worlds for memory-using models (RET-LLM style).

    schema.py     Schema: entity types and relations as data (configs/schema/*.yaml; person–organisation shipped)
    data_config.py  DataConfig (the YAML of a run, configs/data/*.yaml)
    fitting.py    load_fitted: a recipe put on a schema it was not written for (`memlm generate --schema`)
    world.py      build_world: each type's names per split (disjoint, or shared with a test-only share)
    oracle.py     MemoryOracle: every read result comes from the runtime's TripletStore
    passages.py   PassageMaker: realistic passages and hard negatives (passage_bank.py: the phrase bank;
                  passage_pieces.py: names, organisations and filled templates)
    examples.py   Builder / build_records: write, read (7 shapes), unanswerable, update, two-hop, negative
    memories.py   MemorySampler: the memories records ask about (planted chains, reuse), fresh names
    phrasing.py   Phrasing: statements, questions and answers from the schema's phrasings
    episodes.py   Episode (the JSONL format of the eval's episodes=), build_episodes, load_episodes
    generate.py   generate: the whole `memlm generate` run and its files
    real.py       load_real / load_corpus: real annotated passages as write records (the eval probe, training)
    real_corpora.py    read_corpus: each annotated corpus format's rows as passages with gold facts
    real_mapping.py    RedocredSchema: which corpus relation is which fact of a schema
    redocred_split.py  Re-DocRED's dev documents as person–organisation sentences, split by document

Every call and result text is rendered with memory_runtime.protocol, every record is a
memory_runtime.records.Record.
"""
