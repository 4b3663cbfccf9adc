/*M!999999\- enable the sandbox mode */ 
-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB, for debian-linux-gnu (x86_64)
--
-- Host: 127.0.0.1    Database: shop
-- ------------------------------------------------------
-- Server version	10.11.19-MariaDB

/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;
/*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;
/*!40101 SET NAMES utf8mb4 */;
/*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */;
/*!40103 SET TIME_ZONE='+00:00' */;
/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;
/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;
/*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;

--
-- Table structure for table `t_dump`
--

DROP TABLE IF EXISTS `t_dump`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `t_dump` (
  `id` bigint(20) NOT NULL,
  `user_id` int(11) NOT NULL,
  `status` varchar(32) DEFAULT NULL,
  `amount` decimal(10,2) DEFAULT NULL,
  `created_at` datetime DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

--
-- Dumping data for table `t_dump`
--

LOCK TABLES `t_dump` WRITE;
/*!40000 ALTER TABLE `t_dump` DISABLE KEYS */;
INSERT INTO `t_dump` VALUES (1,17,'delivered',315.64,'2026-01-09 19:40:09'),(2,12,'shipped',443.52,'2026-01-14 13:51:43'),(3,16,'delivered',320.57,'2026-01-26 21:05:53'),(4,13,'paid',381.85,'2026-02-09 07:39:24'),(5,17,'shipped',365.19,'2026-02-21 20:02:16'),(6,12,'ünïcode ✓',181.15,'2026-02-26 15:57:26'),(7,16,'cancelled',36.53,NULL),(8,13,'it''s \"quoted\"',278.89,'2026-03-21 10:11:18');
/*!40000 ALTER TABLE `t_dump` ENABLE KEYS */;
UNLOCK TABLES;

--
-- Table structure for table `t_dump_user`
--

DROP TABLE IF EXISTS `t_dump_user`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `t_dump_user` (
  `id` int(11) NOT NULL,
  `name` varchar(64) DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

--
-- Dumping data for table `t_dump_user`
--

LOCK TABLES `t_dump_user` WRITE;
/*!40000 ALTER TABLE `t_dump_user` DISABLE KEYS */;
INSERT INTO `t_dump_user` VALUES (1,'Alice Smith'),(2,'Bob Smith'),(3,'Carol Smith'),(4,'Dave Smith'),(5,'Erin Smith'),(6,'Frank Smith');
/*!40000 ALTER TABLE `t_dump_user` ENABLE KEYS */;
UNLOCK TABLES;
/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;

/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;
/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;
/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
/*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;
/*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;
/*!40111 SET SQL_NOTES=@OLD_SQL_NOTES */;

-- Dump completed on 2026-12-01 10:40:09
