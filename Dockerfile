# One image for every kotae stage; the command picks the stage:
#   docker run kotae:latest kotae serve retriever
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    KOTAE_DATA_DIR=/data \
    KOTAE_LOG_FORMAT=json \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1 \
    MKL_NUM_THREADS=1 \
    RAYON_NUM_THREADS=1
# One compute thread per process: a stage scales by replicas and in-flight messages;
# per-process thread pools the size of the node make replicas starve one another.

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kotae ./kotae
COPY contracts ./contracts
COPY services ./services
RUN pip install . && useradd --create-home --uid 10001 kotae && mkdir -p /data && chown kotae /data

USER kotae
VOLUME ["/data"]
EXPOSE 9100
CMD ["kotae", "--help"]
