# The coordinator side of siliconbench (migrations, dashboard, reconciler). Mac workers run natively:
# Metal is not reachable from a container.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY siliconbench ./siliconbench
RUN pip install --no-cache-dir ".[postgres,dashboard]" "flower>=2"
ENTRYPOINT ["siliconbench"]
