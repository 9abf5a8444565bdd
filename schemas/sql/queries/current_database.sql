SELECT current_database();
