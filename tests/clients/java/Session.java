// MariaDB Connector/J's session through the proxy, run twice: with server-side prepared
// statements (useServerPrepStmts=true: COM_STMT_PREPARE/EXECUTE) and client-side ones.
// Prints a transcript: values with their Java classes, ResultSetMetaData, SQLException classes.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.Arrays;

public class Session {
    static final String T = "t_java";

    static String env(String k) {
        String v = System.getenv(k);
        if (v == null) throw new IllegalStateException(k + " is not set");
        return v;
    }

    static void out(String s) {
        System.out.println(s);
    }

    static String val(Object o) {
        if (o == null) return "null";
        if (o instanceof byte[]) return "byte[]:" + Arrays.toString((byte[]) o);
        return o.getClass().getSimpleName() + ":" + o;
    }

    static void show(ResultSet rs, boolean meta) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        if (meta) {
            for (int i = 1; i <= md.getColumnCount(); i++) {
                out("  column " + md.getColumnLabel(i) + " type=" + md.getColumnType(i) + "/" + md.getColumnTypeName(i)
                        + " class=" + md.getColumnClassName(i) + " precision=" + md.getPrecision(i)
                        + " scale=" + md.getScale(i) + " size=" + md.getColumnDisplaySize(i)
                        + " nullable=" + md.isNullable(i) + " signed=" + md.isSigned(i)
                        + " table=" + md.getTableName(i));
            }
        }
        while (rs.next()) {
            StringBuilder b = new StringBuilder("  row");
            for (int i = 1; i <= md.getColumnCount(); i++) {
                b.append(i == 1 ? " " : ", ").append(md.getColumnLabel(i)).append('=').append(val(rs.getObject(i)));
            }
            out(b.toString());
        }
        rs.close();
    }

    static void session(Connection c, boolean serverPrep) throws SQLException {
        out("=== useServerPrepStmts=" + serverPrep);
        out("server_version: " + (c.getMetaData().getDatabaseProductVersion().isEmpty() ? "missing" : "present"));
        try (Statement s = c.createStatement()) {
            s.execute("DROP TABLE IF EXISTS " + T);
            s.execute("CREATE TABLE " + T + " (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, name VARCHAR(32) NULL,"
                    + " price DECIMAL(10,2) NULL, created DATETIME(3) NULL, data BLOB NULL, big BIGINT UNSIGNED NULL)");
            out("== multi-row insert");
            out("  affected " + s.executeUpdate("INSERT INTO " + T + " (id, k, name, price, created, data, big) VALUES"
                    + " (1, 10, 'alice', 9.99, '2024-01-02 03:04:05.678', x'00ff', 18446744073709551615),"
                    + " (2, 20, NULL, NULL, NULL, NULL, NULL), (3, 30, 'ünï', 0.50, '1999-12-31 23:59:59.000', '', 0),"
                    + " (4, 40, 'dave', 100.00, '2024-02-29 12:00:00.001', 'x', 1), (5, 50, 'eve', 5.00, NULL, NULL, 5),"
                    + " (6, 60, 'frank', 6.00, NULL, NULL, 6)"));
            out("== text query routed by key");
            show(s.executeQuery("SELECT * FROM " + T + " WHERE id = 1"), true);
        }
        out("== prepared, routed by key, NULLs");
        try (PreparedStatement p = c.prepareStatement("SELECT * FROM " + T + " WHERE id = ?")) {
            for (long id : new long[] {2, 1, 3}) {
                p.setLong(1, id);
                show(p.executeQuery(), id == 2);
            }
        }
        out("== prepared batch insert");
        try (PreparedStatement p = c.prepareStatement("INSERT INTO " + T + " (id, k, name, price) VALUES (?, ?, ?, ?)")) {
            Object[][] rows = {{7L, 70, "g", new java.math.BigDecimal("7.50")}, {8L, 80, null, null}, {9L, 90, "i'q\"uote", new java.math.BigDecimal("0.01")}};
            for (Object[] r : rows) {
                for (int i = 0; i < r.length; i++) p.setObject(i + 1, r[i]);
                p.addBatch();
            }
            out("  counts " + Arrays.toString(p.executeBatch()));
        }
        out("== fanned out");
        try (Statement s = c.createStatement()) {
            show(s.executeQuery("SELECT COUNT(*) AS n, SUM(k) AS total, MIN(price) AS cheapest, MAX(created) AS latest FROM " + T), true);
        }
        try (PreparedStatement p = c.prepareStatement("SELECT id, name, big FROM " + T + " WHERE k > ? ORDER BY id")) {
            p.setInt(1, 15);
            show(p.executeQuery(), true);
        }
        out("== transaction on one node");
        c.setAutoCommit(false);
        try (PreparedStatement p = c.prepareStatement("UPDATE " + T + " SET k = k + ? WHERE id = ?")) {
            p.setInt(1, 100);
            p.setLong(2, 1);
            out("  updated " + p.executeUpdate());
            c.rollback();
            p.setInt(1, 1);
            p.setLong(2, 3);
            out("  updated " + p.executeUpdate());
            c.commit();
        }
        c.setAutoCommit(true);
        try (Statement s = c.createStatement()) {
            show(s.executeQuery("SELECT id, k FROM " + T + " WHERE id IN (1, 3) ORDER BY id"), false);
        }
        out("== duplicate key");
        try (PreparedStatement p = c.prepareStatement("INSERT INTO " + T + " (id, k) VALUES (?, ?)")) {
            p.setLong(1, 5);
            p.setInt(2, 0);
            p.executeUpdate();
            out("  no error");
        } catch (SQLException e) {
            out("  " + e.getClass().getSimpleName() + " " + e.getErrorCode() + " " + e.getSQLState());
        }
        out("== warnings");
        try (Statement s = c.createStatement()) {
            s.executeUpdate("INSERT IGNORE INTO " + T + " (id, k) VALUES (5, 0)");
            for (SQLWarning w = s.getWarnings(); w != null; w = w.getNextWarning()) {
                out("  warning " + w.getErrorCode() + " " + w.getMessage());
            }
            show(s.executeQuery("SELECT DATABASE()"), false);
        }
    }

    public static void main(String[] args) throws Exception {
        String base = "jdbc:mariadb://" + env("SP_HOST") + ":" + env("SP_PORT") + "/" + env("SP_DB");
        for (boolean serverPrep : new boolean[] {true, false}) {
            try (Connection c = DriverManager.getConnection(base + "?useServerPrepStmts=" + serverPrep, env("SP_USER"), env("SP_PASSWORD"))) {
                session(c, serverPrep);
            }
        }
        if ("1".equals(System.getenv("SP_TLS"))) {
            String url = base + "?useSsl=true&trustServerCertificate=true";
            try (Connection c = DriverManager.getConnection(url, env("SP_USER"), env("SP_PASSWORD"));
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT 1")) {
                if (!rs.next() || rs.getInt(1) != 1) throw new IllegalStateException("TLS session failed");
                System.err.println("tls: ok");
            }
        }
    }
}
