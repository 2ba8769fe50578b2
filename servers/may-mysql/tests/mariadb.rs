//! Integration tests against a real, private MariaDB (`embedded-mariadb`).
//!
//! Client code runs inside may coroutines on 2 worker threads, as in the
//! coroutine server; server control (SQL as root, signals) runs on the test
//! thread.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use embedded_mariadb::{MariaDb, Options};
use may_mysql::{Conn, Error, Opts, Pool};

const SLEEP_QUERY: &str = "SELECT 1 FROM (SELECT SLEEP(0.010)) t";

/// may's scheduler is global: configure it once, before first use.
///
/// 2 workers, as on the benchmark machine. The stack is may's default,
/// 0x1000 words (32 KiB, may_minihttp's size), the smallest the servers
/// use: measured with an odd size (may then prints each coroutine's peak),
/// these tests peak at about 1850 words (15 KiB) in debug builds.
fn may_setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        may::config().set_workers(2).set_stack_size(0x1000);
    });
}

/// Runs `f` in a may coroutine and returns its result (re-raising a panic).
fn co<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    may_setup();
    may::go!(f)
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// One MariaDB shared by the tests that do not stop it (stopped at exit).
use testkit::db::shared_db;

fn opts_for(db: &MariaDb) -> Opts {
    let mut opts = Opts::from_url(&db.url()).unwrap();
    opts.connect_timeout = Duration::from_secs(2);
    opts.io_timeout = Duration::from_secs(5);
    opts
}

#[test]
fn connect_query_and_ping() {
    let opts = opts_for(shared_db());
    co(move || {
        let mut conn = Conn::connect(&opts).unwrap();
        assert!(conn.server_version().contains("MariaDB"), "{conn:?}");
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
        assert_eq!(conn.query_scalar_i64(SLEEP_QUERY).unwrap(), Some(1));
        conn.ping().unwrap();
        // NULL, no rows, several rows, no result set, big values.
        assert_eq!(conn.query_scalar_i64("SELECT NULL").unwrap(), None);
        assert_eq!(
            conn.query_scalar_i64("SELECT 1 FROM DUAL WHERE 0").unwrap(),
            None
        );
        assert_eq!(
            conn.query_scalar_i64("SELECT seq FROM seq_5_to_5000")
                .unwrap(),
            Some(5)
        );
        assert_eq!(conn.query_scalar_i64("DO 1").unwrap(), None);
        assert_eq!(
            conn.query_scalar_i64("SELECT -9223372036854775808, 'x'")
                .unwrap(),
            Some(i64::MIN)
        );
        // A row much larger than the initial read buffer.
        assert_eq!(
            conn.query_scalar_i64("SELECT 7, REPEAT('x', 1000000)")
                .unwrap(),
            Some(7)
        );
        assert_eq!(
            conn.query_scalar_i64("SELECT DATABASE() = 'bench'")
                .unwrap(),
            Some(1)
        );
        assert!(!conn.is_broken());
    });
}

/// Outside a coroutine may's socket parks the calling thread: slower, but
/// it works (e.g. for a startup check on the main thread).
#[test]
fn works_outside_coroutines() {
    let opts = opts_for(shared_db());
    may_setup();
    let mut conn = Conn::connect(&opts).unwrap();
    assert_eq!(conn.query_scalar_i64(SLEEP_QUERY).unwrap(), Some(1));
    let pool = Pool::new(opts, 2);
    assert_eq!(
        pool.get().unwrap().query_scalar_i64("SELECT 1").unwrap(),
        Some(1)
    );
}

/// Packets of 16 MiB and more travel in several chunks, both ways; a
/// payload of exactly 16 MiB - 1 bytes needs an empty trailing chunk.
#[test]
fn packets_larger_than_16_mib() {
    let opts = opts_for(shared_db());
    co(move || {
        let mut conn = Conn::connect(&opts).unwrap();
        let sql_of_len = |len: usize| {
            let (head, tail) = ("SELECT LENGTH('", "')");
            format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
        };
        // COM_QUERY payload = 1 command byte + the SQL.
        for payload in [0xFF_FFFF - 1, 0xFF_FFFF, 0xFF_FFFF + 1, 17_000_000] {
            let sql = sql_of_len(payload - 1);
            let literal = sql.len() - "SELECT LENGTH('')".len();
            assert_eq!(
                conn.query_scalar_i64(&sql).unwrap(),
                Some(literal as i64),
                "payload {payload}"
            );
        }
        assert_eq!(
            conn.query_scalar_i64("SELECT 5, REPEAT('x', 17000000)")
                .unwrap(),
            Some(5)
        );
        // A 17 MB first value: read, but not an integer.
        let err = conn
            .query_scalar_i64("SELECT REPEAT('1', 17000000)")
            .unwrap_err();
        assert!(matches!(err, Error::Protocol(_)), "{err}");
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
    });
}

#[test]
fn server_errors_keep_the_connection_usable() {
    let opts = opts_for(shared_db());
    co(move || {
        let mut conn = Conn::connect(&opts).unwrap();
        let err = conn.query_scalar_i64("SELEC 1").unwrap_err();
        assert_eq!(err.server_code(), Some(1064), "{err}");
        assert!(!conn.is_broken());
        // A non-integer value: reported, rows drained, connection fine.
        let err = conn
            .query_scalar_i64("SELECT 'abc' UNION SELECT 'def'")
            .unwrap_err();
        assert!(matches!(err, Error::Protocol(_)), "{err}");
        assert!(!conn.is_broken());
        // An error while rows are being sent (after the column definitions):
        // the subquery returns two rows only for seq = 3.
        let err = conn
            .query_scalar_i64(
                "SELECT seq, IF(seq = 3, (SELECT 1 UNION SELECT 2), 0) FROM seq_1_to_5",
            )
            .unwrap_err();
        assert_eq!(err.server_code(), Some(1242), "{err}");
        assert!(!conn.is_broken());
        assert_eq!(conn.query_scalar_i64("SELECT 2").unwrap(), Some(2));
    });
}

#[test]
fn multiple_result_sets_are_drained() {
    let db = shared_db();
    db.sql(
        "DELIMITER //
         CREATE OR REPLACE PROCEDURE bench.two_results() BEGIN SELECT 7; SELECT 8; END //",
    )
    .unwrap();
    let opts = opts_for(db);
    co(move || {
        let mut conn = Conn::connect(&opts).unwrap();
        assert_eq!(
            conn.query_scalar_i64("CALL two_results()").unwrap(),
            Some(7)
        );
        assert_eq!(conn.query_scalar_i64("SELECT 3").unwrap(), Some(3));
    });
}

#[test]
fn wrong_password_and_unknown_database_are_server_errors() {
    let db = shared_db();
    let opts = opts_for(db);
    co(move || {
        let mut bad = opts.clone();
        bad.password = "wrong".into();
        let err = Conn::connect(&bad).unwrap_err();
        assert_eq!(err.server_code(), Some(1045), "{err}");
        assert!(err.to_string().contains("Access denied"), "{err}");

        let mut bad = opts.clone();
        bad.db = Some("no_such_db".into());
        let err = Conn::connect(&bad).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Server {
                    code: 1044 | 1049,
                    ..
                }
            ),
            "{err}"
        );
    });
}

#[test]
fn empty_password_and_percent_encoded_credentials() {
    let db = shared_db();
    db.sql(
        "CREATE USER IF NOT EXISTS 'nopass'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
         CREATE USER IF NOT EXISTS 'we:ird@'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('p@ss:w/rd%');",
    )
    .unwrap();
    let port = db.port();
    co(move || {
        let opts = Opts::from_url(&format!("mysql://nopass@127.0.0.1:{port}")).unwrap();
        let mut conn = Conn::connect(&opts).unwrap();
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));

        let url = format!("mysql://we%3Aird%40:p%40ss%3Aw%2Frd%25@127.0.0.1:{port}");
        let mut conn = Conn::connect(&Opts::from_url(&url).unwrap()).unwrap();
        assert_eq!(
            conn.query_scalar_i64("SELECT CURRENT_USER() = 'we:ird@@%'")
                .unwrap(),
            Some(1)
        );
    });
}

/// Offering caching_sha2_password (unknown to MariaDB) makes the server send
/// an auth switch request to mysql_native_password, which we must follow.
#[test]
fn auth_switch_request_is_followed() {
    let opts = opts_for(shared_db());
    co(move || {
        let mut conn = Conn::connect_offering_plugin(&opts, "caching_sha2_password").unwrap();
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
        let mut conn = Conn::connect_offering_plugin(&opts, "no_such_plugin").unwrap();
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));

        let mut bad = opts.clone();
        bad.password = "wrong".into();
        let err = Conn::connect_offering_plugin(&bad, "caching_sha2_password").unwrap_err();
        assert_eq!(err.server_code(), Some(1045), "{err}");
    });
}

/// Queries park the coroutine, not the worker: 20 concurrent SLEEP(0.5)
/// queries on 2 workers finish in about 0.5 s; blocking sockets would need
/// at least 10 x 0.5 s. (A generous bound: this checks the model, not speed.)
#[test]
fn waiting_queries_do_not_block_worker_threads() {
    let opts = opts_for(shared_db());
    may_setup();
    let conns: Vec<Conn> = co({
        let opts = opts.clone();
        move || (0..20).map(|_| Conn::connect(&opts).unwrap()).collect()
    });
    let start = Instant::now();
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            may::go!(move || conn.query_scalar_i64("SELECT 1 FROM (SELECT SLEEP(0.5)) t"))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), Some(1));
    }
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[test]
fn pool_of_4_serves_200_coroutines() {
    let opts = opts_for(shared_db());
    may_setup();
    let pool = Pool::new(opts, 4);
    let handles: Vec<_> = (0..200)
        .map(|i| {
            let pool = pool.clone();
            may::go!(move || -> Result<Vec<u32>, Error> {
                let mut ids = Vec::new();
                for _ in 0..5 {
                    let mut conn = pool.get()?;
                    ids.push(conn.connection_id());
                    let sql = if i % 10 == 0 { SLEEP_QUERY } else { "SELECT 1" };
                    assert_eq!(conn.query_scalar_i64(sql)?, Some(1));
                }
                Ok(ids)
            })
        })
        .collect();
    let mut ids = HashSet::new();
    for h in handles {
        ids.extend(h.join().unwrap().unwrap());
    }
    assert!(ids.len() <= 4, "{} connections opened: {ids:?}", ids.len());
    assert_eq!(pool.idle_count(), ids.len());
}

#[test]
fn pool_wait_is_bounded() {
    let opts = opts_for(shared_db());
    let pool = Pool::with_wait_timeout(opts, 1, Duration::from_millis(300));
    co(move || {
        let held = pool.get().unwrap();
        let start = Instant::now();
        let err = pool.get().unwrap_err();
        assert!(matches!(err, Error::PoolTimeout { .. }), "{err}");
        assert!(start.elapsed() >= Duration::from_millis(250));
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(held);
        let mut conn = pool.get().unwrap();
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
    });
}

/// Waiting for a slot parks without a timer: a released slot goes to the
/// oldest waiter at once (a waiter woken by the pool's reaper would get
/// `PoolTimeout` instead), waiters that time out together each do so on
/// time, and a timed-out waiter takes no slot with it.
#[test]
fn pool_hands_released_slots_to_waiters_in_turn() {
    let opts = opts_for(shared_db());
    may_setup();
    let pool = Pool::with_wait_timeout(opts.clone(), 1, Duration::from_secs(10));
    let held = pool.get().unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (waiter_pool, served) = (pool.clone(), served.clone());
            let h = may::go!(move || -> Result<(), Error> {
                let mut conn = waiter_pool.get()?;
                served.lock().unwrap().push(i);
                assert_eq!(conn.query_scalar_i64(SLEEP_QUERY)?, Some(1));
                Ok(())
            });
            // Queue them in a known order: the next starts once this one waits.
            let deadline = Instant::now() + Duration::from_secs(10);
            while pool.waiting_count() <= i {
                assert!(Instant::now() < deadline, "waiter {i} never queued");
                thread::sleep(Duration::from_millis(5));
            }
            h
        })
        .collect();
    assert!(
        served.lock().unwrap().is_empty(),
        "served while the slot was held"
    );
    let start = Instant::now();
    drop(held);
    for h in waiters {
        h.join().unwrap().unwrap();
    }
    assert_eq!(*served.lock().unwrap(), [0, 1, 2], "served out of turn");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );

    let pool = Pool::with_wait_timeout(opts, 1, Duration::from_millis(300));
    let held = pool.get().unwrap();
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let pool = pool.clone();
            may::go!(move || {
                let start = Instant::now();
                (pool.get().map(drop), start.elapsed())
            })
        })
        .collect();
    for h in waiters {
        let (result, waited) = h.join().unwrap();
        assert!(
            matches!(result, Err(Error::PoolTimeout { .. })),
            "{result:?}"
        );
        assert!(
            waited >= Duration::from_millis(250),
            "gave up after {waited:?}"
        );
        assert!(waited < Duration::from_secs(5), "gave up after {waited:?}");
    }
    drop(held);
    let mut conn = pool.get().unwrap();
    assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
    drop(conn);
    assert_eq!(pool.idle_count(), 1);
}

/// A connection killed while idle is noticed before reuse (no failed
/// query); one killed mid-query fails that query, is discarded, and the
/// pool opens a new one.
#[test]
fn pool_discards_killed_connections() {
    let db = shared_db();
    let pool = Pool::new(opts_for(db), 1);

    let first_id = co({
        let pool = pool.clone();
        move || {
            let mut conn = pool.get().unwrap();
            conn.query_scalar_i64("SELECT 1").unwrap();
            conn.connection_id()
        }
    });
    db.sql(&format!("KILL CONNECTION {first_id}")).unwrap();
    thread::sleep(Duration::from_millis(300));
    let second_id = co({
        let pool = pool.clone();
        move || {
            let mut conn = pool.get().unwrap();
            assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
            conn.connection_id()
        }
    });
    assert_ne!(first_id, second_id);

    // Kill it while it runs a long query.
    let running = may::go!({
        let pool = pool.clone();
        move || {
            let mut conn = pool.get().unwrap();
            conn.query_scalar_i64("SELECT SLEEP(30)")
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let busy = db
            .sql(&format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {second_id} AND INFO LIKE 'SELECT SLEEP%'"
            ))
            .unwrap();
        if busy.trim() == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "the SLEEP query never showed up");
        thread::sleep(Duration::from_millis(50));
    }
    db.sql(&format!("KILL CONNECTION {second_id}")).unwrap();
    let err = running.join().unwrap().unwrap_err();
    println!("killed mid-query: {err}");
    let third_id = co(move || {
        let mut conn = pool.get().unwrap();
        assert_eq!(conn.query_scalar_i64("SELECT 1").unwrap(), Some(1));
        conn.connection_id()
    });
    assert_ne!(third_id, second_id);
}

fn timed_query(pool: &Pool) -> (Result<Option<i64>, Error>, Duration) {
    let pool = pool.clone();
    may::go!(move || {
        let start = Instant::now();
        let result = pool.get().and_then(|mut c| c.query_scalar_i64("SELECT 1"));
        (result, start.elapsed())
    })
    .join()
    .unwrap()
}

/// Opens `n` connections at once (each holds its connection during a short
/// sleep query), leaving them idle in the pool.
fn warm_up(pool: &Pool, n: usize) {
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let pool = pool.clone();
            may::go!(move || pool
                .get()?
                .query_scalar_i64("SELECT 1 FROM (SELECT SLEEP(0.2)) t"))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), Some(1));
    }
    assert_eq!(pool.idle_count(), n);
}

/// Waits until every thread of the server is stopped: kill(2) returns
/// before SIGSTOP has reached them, and a query sent in between is answered.
fn wait_until_stopped(db: &MariaDb) {
    let pid = db.pid().expect("running");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let states: Vec<char> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
            .filter_map(|stat| stat.rsplit_once(") ")?.1.chars().next())
            .collect();
        if !states.is_empty() && states.iter().all(|&s| s == 'T' || s == 't') {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "mariadbd not stopped: {states:?}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// The database hangs, stops and comes back on the same port: callers get
/// errors within a bounded time, and the pool recovers by itself.
#[test]
fn pool_recovers_after_database_restart() {
    let mut db = MariaDb::start(Options::default()).expect("starting a private MariaDB");
    let mut opts = opts_for(&db);
    opts.connect_timeout = Duration::from_secs(1);
    opts.io_timeout = Duration::from_secs(2);
    may_setup();
    let busy = Pool::new(opts.clone(), 4);
    warm_up(&busy, 4);

    // Hung server (SIGSTOP): an open connection's query and a new
    // connection's handshake both time out.
    db.signal(libc::SIGSTOP).unwrap();
    wait_until_stopped(&db);
    let (result, elapsed) = timed_query(&busy);
    assert!(matches!(result, Err(Error::Timeout { .. })), "{result:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let connect = co({
        let opts = opts.clone();
        move || {
            let start = Instant::now();
            (Conn::connect(&opts).map(|_| ()), start.elapsed())
        }
    });
    assert!(
        matches!(connect.0, Err(Error::Timeout { .. })),
        "{connect:?}"
    );
    assert!(connect.1 < Duration::from_secs(5), "{connect:?}");
    db.signal(libc::SIGCONT).unwrap();
    assert_eq!(timed_query(&busy).0.unwrap(), Some(1));

    // A second pool that stays idle through the outage.
    let idle = Pool::new(opts.clone(), 4);
    warm_up(&idle, 4);

    // Stopped server: every call fails, fast.
    db.stop();
    for _ in 0..5 {
        let (result, elapsed) = timed_query(&busy);
        assert!(matches!(result, Err(Error::Io { .. })), "{result:?}");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    }
    println!("while stopped: {}", timed_query(&busy).0.unwrap_err());

    // Back on the same port and datadir: both pools serve again at once. The
    // idle pool's connections all died with the old server; they are noticed
    // before reuse, so not even the first query fails.
    db.restart().unwrap();
    assert_eq!(timed_query(&idle).0.unwrap(), Some(1));
    assert_eq!(timed_query(&busy).0.unwrap(), Some(1));
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let pool = if i % 2 == 0 {
                busy.clone()
            } else {
                idle.clone()
            };
            may::go!(move || pool.get()?.query_scalar_i64(SLEEP_QUERY))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), Some(1));
    }
}
