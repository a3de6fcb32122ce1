//! What the egress proxy costs per connection, on loopback: a new connection to an echo
//! service and one 64-byte round trip, directly and through the proxy (HTTP `CONNECT` and
//! SOCKS5, the proxy resolving nothing: the destination is an allowed address), and the
//! same round trip on a connection already open through the proxy. Each iteration runs on
//! the runtime with `block_on` (the same small cost in every variant).

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy_egress::serve;
use mcpproxy_sandbox::egress::{EgressRule, EgressRules};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

async fn proxy(target: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let rules = EgressRules::new(vec![
        EgressRule::parse(&format!("127.0.0.1:{target}")).unwrap(),
    ]);
    tokio::spawn(serve(
        listener,
        Arc::new(rules),
        Arc::from("bench"),
        Arc::new(|_| {}),
    ));
    port
}

async fn round_trip(stream: &mut TcpStream) {
    let message = [7u8; 64];
    stream.write_all(&message).await.unwrap();
    let mut back = [0u8; 64];
    stream.read_exact(&mut back).await.unwrap();
}

async fn through_connect(proxy: u16, target: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .write_all(format!("CONNECT 127.0.0.1:{target} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 39]; // "HTTP/1.1 200 Connection established\r\n\r\n"
    stream.read_exact(&mut head).await.unwrap();
    stream
}

async fn through_socks(proxy: u16, target: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut request = vec![5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
    request.extend_from_slice(&target.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 12];
    stream.read_exact(&mut reply).await.unwrap();
    stream
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (target, proxy) = runtime.block_on(async {
        let target = echo().await;
        (target, proxy(target).await)
    });
    let mut group = c.benchmark_group("egress");
    group.bench_function("direct: connect + 64 B round trip", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut stream = TcpStream::connect(("127.0.0.1", target)).await.unwrap();
                stream.set_nodelay(true).unwrap();
                round_trip(&mut stream).await;
            })
        })
    });
    group.bench_function("CONNECT: connect + 64 B round trip", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut stream = through_connect(proxy, target).await;
                round_trip(&mut stream).await;
            })
        })
    });
    group.bench_function("SOCKS5: connect + 64 B round trip", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut stream = through_socks(proxy, target).await;
                round_trip(&mut stream).await;
            })
        })
    });
    let mut open = runtime.block_on(through_connect(proxy, target));
    group.bench_function("open tunnel: 64 B round trip", |b| {
        b.iter(|| runtime.block_on(round_trip(&mut open)))
    });
    let mut direct = runtime.block_on(async {
        let stream = TcpStream::connect(("127.0.0.1", target)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    });
    group.bench_function("open direct: 64 B round trip", |b| {
        b.iter(|| runtime.block_on(round_trip(&mut direct)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
