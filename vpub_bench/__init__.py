"""vpub_bench: the papers' comparison runs and the benchmarks of vpub_spark, each with a
typed configuration (`vpub compare`, `vpub bench ...`). It lives beside the library and
uses it as any program would; its plots and load generator need the `bench` extra
(`pip install 'vpub_spark[bench]'`: matplotlib, aiohttp)."""
