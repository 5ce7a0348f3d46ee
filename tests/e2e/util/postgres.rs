//! PostgreSQL for the importer tests: a throwaway cluster in a temporary
//! directory, reached only through a Unix socket there, and osm2pgsql
//! importing into fresh databases of it. On drop (a panicking test too) the
//! server is stopped and the directory removed, so nothing is left running.
//!
//! PostgreSQL refuses to run as root: as root (CI), its commands run as
//! `nobody` through setpriv(1), in a directory chowned to that user; as
//! anyone else, as the current user. Nothing is created outside the
//! temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU16, Ordering};

use crate::util::{is_root, run, succeeds, tool};

/// The superuser initdb creates; osm2pgsql and psql connect as it.
const SUPERUSER: &str = "osm";

/// The database created with PostGIS that each import's database copies.
const TEMPLATE: &str = "osm_template";

/// The four tables of osm2pgsql's default style, in a fixed order.
pub const TABLES: [&str; 4] = [
    "planet_osm_point",
    "planet_osm_line",
    "planet_osm_polygon",
    "planet_osm_roads",
];

/// Distinct ports for the clusters of tests running in parallel (the socket
/// lies in each cluster's own directory, so a collision is harmless anyway).
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A PostgreSQL command (`initdb`, `pg_ctl`, `psql`): found through PATH
/// (Nix), else in `pg_config --bindir` (Debian keeps them in
/// /usr/lib/postgresql/15/bin), as `.ci/deps` probes them. Fails the test
/// loudly, naming the Debian package, when neither has it.
pub fn pg_command(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join(name))
        .find(|c| c.is_file());
    let from_pg_config = || {
        Command::new("pg_config")
            .arg("--bindir")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join(name))
            .filter(|c| c.is_file())
    };
    on_path.or_else(from_pg_config).unwrap_or_else(|| {
        panic!(
            "{name} (Debian package postgresql-15) is required by the importer tests: \
             neither PATH nor `pg_config --bindir` has it; run .ci/deps test"
        )
    })
}

/// A running PostgreSQL cluster in a temporary directory.
pub struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    databases: AtomicU16,
}

impl Cluster {
    /// initdb (trust auth) and start a server listening only on a socket
    /// in the cluster's directory, with a PostGIS template database.
    pub fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        if is_root() {
            let mut c = Command::new("chown");
            c.arg("nobody:nogroup").arg(dir.path());
            succeeds(c);
        }
        let slot = NEXT_PORT.fetch_add(1, Ordering::Relaxed) % 5;
        let port = 54000 + (std::process::id() % 2000) as u16 * 5 + slot;
        let cluster = Cluster {
            dir,
            port,
            databases: AtomicU16::new(0),
        };
        cluster.initdb();
        cluster.pg_ctl_start();
        cluster.psql("postgres", &format!("CREATE DATABASE {TEMPLATE}"));
        cluster.psql(TEMPLATE, "CREATE EXTENSION postgis");
        cluster
    }

    /// The socket directory (`-H` of osm2pgsql and psql).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A server command, run as `nobody` when this process is root.
    fn server_command(&self, name: &str) -> Command {
        let program = pg_command(name);
        if !is_root() {
            return Command::new(program);
        }
        let mut c = tool("setpriv", "util-linux", "the importer tests (as root)");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(program);
        c
    }

    fn initdb(&self) {
        let mut c = self.server_command("initdb");
        c.arg("-D")
            .arg(self.data_dir())
            .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync"]);
        succeeds(c);
    }

    fn pg_ctl_start(&self) {
        let options = format!(
            "-p {} -c listen_addresses='' -c unix_socket_directories='{}' \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.socket_dir().display()
        );
        let mut c = self.server_command("pg_ctl");
        c.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-w", "-t", "120", "-o", &options, "start"]);
        let out = run(c);
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
        );
    }

    /// Run one SQL command in `db` with psql; returns its unaligned output.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let mut c = Command::new(pg_command("psql"));
        c.args(self.connection(db, "-h", "-p"))
            .args(["-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql]);
        String::from_utf8(succeeds(c)).expect("psql output is UTF-8")
    }

    /// `HOST DIR PORT N -U USER -d DB`: how osm2pgsql (`-H`, `-P`) and
    /// psql (`-h`, `-p`) connect.
    fn connection(&self, db: &str, host: &str, port: &str) -> Vec<String> {
        let socket = self.socket_dir().display().to_string();
        let number = self.port.to_string();
        [
            host,
            socket.as_str(),
            port,
            number.as_str(),
            "-U",
            SUPERUSER,
            "-d",
            db,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// A fresh database with PostGIS; returns its name.
    pub fn new_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let db = format!("import{n}");
        self.create_database(&db);
        db
    }

    /// The database `db`, with PostGIS.
    pub fn create_database(&self, db: &str) {
        self.psql(
            "postgres",
            &format!("CREATE DATABASE {db} TEMPLATE {TEMPLATE}"),
        );
    }

    /// The libpq variables that lead a command given only `-d DB` (as a
    /// user types osm2pgsql) to this cluster.
    pub fn libpq_env(&self) -> [(&'static str, String); 3] {
        [
            ("PGHOST", self.socket_dir().display().to_string()),
            ("PGPORT", self.port.to_string()),
            ("PGUSER", SUPERUSER.to_owned()),
        ]
    }

    /// `osm2pgsql --create` (non-slim, default style) of `file` into a
    /// fresh database; returns the database and osm2pgsql's output.
    pub fn import(&self, file: &Path) -> (String, Output) {
        let db = self.new_database();
        let mut c = tool("osm2pgsql", "osm2pgsql", "the importer tests");
        c.args(["--create", "--cache", "64", "--number-processes", "1"])
            .args(self.connection(&db, "-H", "-P"))
            .arg(file);
        (db, run(c))
    }

    /// [`Cluster::import`], which must succeed; returns the database.
    pub fn import_ok(&self, file: &Path) -> String {
        let (db, out) = self.import(file);
        assert!(
            out.status.success(),
            "osm2pgsql refused {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        db
    }

    /// The row count of each of [`TABLES`] in `db`, `WHERE`-filtered when
    /// `filter` is given.
    pub fn counts(&self, db: &str, filter: Option<&str>) -> Vec<(String, u64)> {
        let filter = filter.map_or(String::new(), |f| format!(" WHERE {f}"));
        TABLES
            .iter()
            .map(|t| {
                let n = self.psql(db, &format!("SELECT count(*) FROM {t}{filter}"));
                (t.to_string(), n.trim().parse().expect("a count"))
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut c = self.server_command("pg_ctl");
        c.arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w", "stop"]);
        let _ = c.output();
    }
}
