-- Database and user for every benchmark stack (DB_USER/DB_PASSWORD bench/bench).
-- Run by the mysql image from /docker-entrypoint-initdb.d on first start, and
-- usable as is on a private server: mariadb --socket=DIR/sock -u root < init.sql
CREATE DATABASE IF NOT EXISTS bench;
CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED WITH mysql_native_password BY 'bench';
CREATE USER IF NOT EXISTS 'bench'@'localhost' IDENTIFIED WITH mysql_native_password BY 'bench';
GRANT ALL PRIVILEGES ON bench.* TO 'bench'@'%';
GRANT ALL PRIVILEGES ON bench.* TO 'bench'@'localhost';
FLUSH PRIVILEGES;
