# Two commands do all set-up on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
PY      = $(BIN)/python

.PHONY: demo test lint docs wheel-check mutation-check bench-docs bench-scale bench-statdb bench-update bench-lake compare-adult compare-texas bench-generate bench-publish bench-publish-10m bench-workers bench-texas bench-utility bench-multi-sa bench-marginals bench-frame bench-report compare-marginals compare-marginals-skew bench-bip-adult bench-cluster bench-cold spark-archive clean check-java

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e '.[dev]'
	# pyCANON (the cross-check of vpub check) and ANJANA (vpub bench peers) pin exact
	# numpy/scipy/pandas/typing_extensions versions that conflict with ours; what they
	# import needs only numpy, pandas and beartype
	$(PY) -m pip install --quiet --no-deps 'pycanon>=1.3' 'anjana>=1.2' 'beartype>=0.18'
	touch $@ $(VENV)/.installed

# vpub_bench's commands (vpub compare, vpub bench) with their plots and load generator
$(VENV)/.installed-bench: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/activate
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

# the documentation site (docs/, mkdocs.yml) into site/; --strict: a broken link fails
docs: $(VENV)/.installed-docs
	$(BIN)/mkdocs build --strict --site-dir site

# the suite against three deliberate bugs, each in a copy of the checkout: every one must fail it
mutation-check: check-java $(VENV)/.installed-dev
	$(PY) scripts/mutation_check.py

# the wheel installed into a new venv runs `vpub demo` in process (CI runs it)
wheel-check:
	PYTHON=$(PY) scripts/check_wheel.sh

check-java:
	@scripts/check_java.sh

demo: check-java $(VENV)/.installed
	$(BIN)/vpub demo --out out/demo

# the suite's cache (tests/conftest.py uses the same): the Spark driver's class-data
# archive, built once before the suite, so that each JVM the tests start maps it
TEST_CACHE = $(CURDIR)/.cache/vpub

test: check-java $(VENV)/.installed-dev
	scripts/install_browser.sh
	PYTHON=$(PYTHON) scripts/install_airflow.sh
	VPUB_CACHE=$(TEST_CACHE) $(BIN)/vpub spark-archive
	# two workers, each test file on one of them (its module fixtures, such as a
	# cluster or a Spark Connect server, start once): docs/how-to/setup.md has the times
	VPUB_CACHE=$(TEST_CACHE) $(BIN)/pytest -q -n 2 --dist loadfile

# ruff (lint and format) and mypy; CI runs this before the tests
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench-generate: check-java $(VENV)/.installed
	rm -rf out/bench-sal-10m
	$(BIN)/vpub datasets generate sal --rows 10000000 --seed 7 --out out/bench-sal-10m

# The benchmarks behind docs/benchmarks/: each writes its JSON (figures, command, date,
# machine) and copies it to $(DOCS_DATA), from which the pages' tables are generated.
DOCS_DATA := docs/benchmarks/data

# every benchmark and comparison the docs show, one after another (hours on 2 cores)
bench-docs: bench-publish bench-publish-10m bench-workers bench-texas bench-cold bench-utility bench-marginals bench-frame bench-report bench-scale bench-statdb bench-update compare-adult compare-texas bench-bip-adult compare-marginals compare-marginals-skew bench-lake

# a comparison's means, run record and plots, into the docs (from OUT to FIGURES)
define copy-comparison
	cp $(1)/summary.csv $(1)/run.json $(1)/*.png $(2)/
endef

# publish benchmarks: medians per engine, ratio in one run
bench-publish: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench publish --rows 1000000 --repeat 3 --out out/bench-1m
	cp out/bench-1m/results.json $(DOCS_DATA)/publish-1m.json

# in process on 1 and 2 workers at 1M, 3M and 10M rows: rows/s per step and the speed-up
# of the publish, the KL and workload of its release, and the marginals
bench-workers: $(VENV)/.installed-bench
	for n in 1000000 3000000 10000000; do \
	  $(BIN)/vpub bench publish --rows $$n --repeat 3 --engines inprocess --workers 1,2 --out out/bench-workers-$$n && \
	  cp out/bench-workers-$$n/results.json $(DOCS_DATA)/publish-workers-$$n.json && \
	  $(BIN)/vpub bench kl out/bench-workers-$$n/releases/bench-inprocess --source out/bench-workers-$$n/sal-$$n/data \
	    --engines inprocess --workers 1,2 --repeat 3 --out out/bench-workers-$$n/kl && \
	  cp out/bench-workers-$$n/kl/bench-inprocess.json $(DOCS_DATA)/kl-workers-$$n.json || exit 1; \
	done
	for n in 1000000 3000000 10000000; do \
	  $(BIN)/vpub bench marginals --rows $$n --m 6 --engines inprocess --workers 1,2 --out out/bench-marginals-$$n && \
	  cp out/bench-marginals-$$n/marginals.json $(DOCS_DATA)/marginals-workers-$$n.json || exit 1; \
	done

bench-publish-10m: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench publish --rows 10000000 --repeat 2 --out out/bench-10m
	cp out/bench-10m/results.json $(DOCS_DATA)/publish-10m.json

# A cold Spark publish of Adult (a new process each), with and without the
# driver's class-data archive, and in process; paired rounds, medians
bench-cold: check-java $(VENV)/.installed-bench
	$(BIN)/vpub bench cold --config conf/adult_uad.yaml --repeat 5 --out out/bench-cold
	cp out/bench-cold/cold.json $(DOCS_DATA)/cold-adult.json

# the Spark driver's class-data archive (in $VPUB_CACHE, else $XDG_CACHE_HOME/vpub, else ~/.cache/vpub)
spark-archive: check-java $(VENV)/.installed
	$(BIN)/vpub spark-archive

bench-texas: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench publish --name texas --rows 177148 --repeat 3 --out out/bench-texas
	cp out/bench-texas/results.json $(DOCS_DATA)/publish-texas.json

# 000 Appendix B: partitioned multi-SA on 1M sal rows per engine; exact vs partitioned vs UAD on a 50k sample
bench-multi-sa: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench multi-sa --rows 1000000 --out out/bench-1m

# M1..M5 of 1M census rows at m = 6 (Spark and in-process) and ANGEL, one run
bench-marginals: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench marginals --rows 1000000 --m 6 --out out/bench-1m
	cp out/bench-1m/marginals.json $(DOCS_DATA)/marginals-1m.json

# a 1M-row Spark DataFrame published against the same rows from Parquet, on Spark
bench-frame: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench frame --rows 1000000 --repeat 3 --out out/bench-frame
	cp out/bench-frame/frame.json $(DOCS_DATA)/frame-1m.json

# vpub report and vpub explore as a user runs them: Adult, and a 10M-row sal release
bench-report: $(VENV)/.installed-bench
	$(BIN)/vpub bench report --adult data/adult --rows 10000000 --out out/bench-report
	cp out/bench-report/report.json $(DOCS_DATA)/report.json

# publish on Spark at 1M and 3M rows: time per step, driver memory, a fitted cost model
# (add sizes, e.g. --rows 1e6,3e6,1e7,3e7, where the machine allows)
bench-scale: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/vpub bench scale --rows 1e6,3e6 --out out/bench-scale
	cp out/bench-scale/scale.json $(DOCS_DATA)/scale.json

# the statistical database (004): a 600k-row store, query times, and vpub serve under load
bench-statdb: check-java spark-archive $(VENV)/.installed-bench
	test -f out/sal-600k/table.yaml || $(BIN)/vpub datasets generate sal --rows 600000 --seed 7 --out out/sal-600k
	$(BIN)/vpub statdb build --config conf/statdb_sal.yaml
	$(BIN)/vpub bench statdb out/private/sal-store --out out/bench-statdb
	cp out/bench-statdb/sal-store.json $(DOCS_DATA)/statdb-600k.json
	$(BIN)/vpub bench serve out/private/sal-store --out out/bench-serve
	cp out/bench-serve/sal-store.json $(DOCS_DATA)/serve.json

# an updatable store: a 1% churn update of 6M rows against the full build (in process)
bench-update: $(VENV)/.installed-bench
	$(BIN)/vpub bench update --rows 6000000 --churn 0.01 --out out/bench-update
	cp out/bench-update/update.json $(DOCS_DATA)/update-6m.json

# 000 Figures 1-3 on Adult: KL, relative error and design time of each method against c
compare-adult: $(VENV)/.installed-bench
	test -f data/adult/adult.data.csv || $(BIN)/vpub datasets adult --download --raw data/adult --out out/adult
	$(BIN)/vpub compare --config vpub_bench/conf/compare_adult.yaml
	$(call copy-comparison,out/compare/adult,docs/figures/adult)

# 000 Figures 5-10 on the texas-like table (177,148 rows)
compare-texas: $(VENV)/.installed-bench
	test -f out/texas/table.yaml || $(BIN)/vpub datasets generate texas --rows 177148 --seed 7 --out out/texas
	$(BIN)/vpub compare --config vpub_bench/conf/compare_texas.yaml
	$(call copy-comparison,out/compare/texas,docs/figures/texas)

# 002 Figures 2-5 on census (200k rows) and on Adult
compare-marginals: check-java spark-archive $(VENV)/.installed-bench
	test -f out/census-200k/table.yaml || $(BIN)/vpub datasets generate census --rows 200000 --seed 1 --out out/census-200k
	$(BIN)/vpub compare --config vpub_bench/conf/compare_marginals.yaml
	$(call copy-comparison,out/compare/census-marginals,docs/figures/marginals_census)
	$(BIN)/vpub compare --config vpub_bench/conf/compare_marginals_adult.yaml
	$(call copy-comparison,out/compare/adult-marginals,docs/figures/marginals_adult)

# the lake's readers: Iceberg registration and a DuckDB estimate on a 10M-row release
bench-lake: $(VENV)/.installed-dev $(VENV)/.installed-bench
	$(BIN)/vpub bench lake --rows 10000000 --out out/bench-lake
	cp out/bench-lake/lake.json $(DOCS_DATA)/lake-10m.json

# marginals on a skewed sensitive attribute (top share 0.9/m .. 0.99/m, m = 2, 3, 4)
compare-marginals-skew: $(VENV)/.installed-bench
	test -f out/census-200k/table.yaml || $(BIN)/vpub datasets generate census --rows 200000 --seed 1 --out out/census-200k
	$(BIN)/vpub compare --config vpub_bench/conf/compare_marginals_skew.yaml
	mkdir -p docs/figures/marginals_skew
	$(call copy-comparison,out/compare/census-marginals-skew,docs/figures/marginals_skew)

# 10M sal and 1M texas on a local standalone cluster, 1 vs 2 one-core workers
bench-cluster: check-java spark-archive $(VENV)/.installed-bench
	$(BIN)/python deploy/bench_cluster.py --data sal:10000000 --data texas:1000000

# 000 Figure 3: exact multi-SA vs UAD (and GD, single-attribute) on a 10,000-row Adult sample, c = 1..9
bench-bip-adult: $(VENV)/.installed-bench
	$(BIN)/vpub compare --config vpub_bench/conf/compare_adult_bip.yaml
	$(call copy-comparison,out/compare/adult_bip,docs/figures/adult_bip)

# needs the release and data of `make bench-publish`
bench-utility: $(VENV)/.installed-bench
	$(BIN)/vpub bench utility out/bench-1m/releases/bench-inprocess --source out/bench-1m/sal-1000000 --repeat 3 --out out/bench-utility
	cp out/bench-utility/bench-inprocess.json $(DOCS_DATA)/utility-1m.json

clean:
	rm -rf out .pytest_cache .hypothesis
