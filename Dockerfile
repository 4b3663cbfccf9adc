# The shardproxy binary in a small runtime image.
#   docker build -t shardproxy .
#   docker run -p 3307:3307 -v "$PWD/rules/my.toml:/etc/shardproxy/rules.toml:ro" shardproxy

# Build stage. The release build takes several minutes.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release

# Runtime stage.
FROM debian:bookworm-slim
COPY --from=build /src/target/release/shardproxy /usr/local/bin/shardproxy
# Default rules: the Docker demo's. Mount your own file over this path.
COPY rules/docker.toml /etc/shardproxy/rules.toml
RUN useradd --system --no-create-home --shell /usr/sbin/nologin shardproxy
USER shardproxy
EXPOSE 3307
CMD ["shardproxy", "serve", "--config", "/etc/shardproxy/rules.toml"]
