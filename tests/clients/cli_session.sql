-- Read by `source` in cli.sh: statements one by one, each result with its column metadata.
SELECT id, k, name, price, created, data, big FROM t_cli WHERE id = 2;
SELECT id, k, name, price, created, HEX(data) AS data, big FROM t_cli WHERE id = 1;
SELECT COUNT(*) AS n, SUM(k) AS total, MIN(price) AS cheapest, MAX(created) AS latest FROM t_cli;
SELECT id, name FROM t_cli ORDER BY id;
BEGIN;
UPDATE t_cli SET k = k + 100 WHERE id = 1;
SELECT k FROM t_cli WHERE id = 1;
ROLLBACK;
SELECT k FROM t_cli WHERE id = 1;
START TRANSACTION;
UPDATE t_cli SET k = k + 1 WHERE id = 3;
COMMIT;
SELECT k FROM t_cli WHERE id = 3;
INSERT IGNORE INTO t_cli (id, k) VALUES (1, 0);
SHOW WARNINGS;
SELECT DATABASE();
